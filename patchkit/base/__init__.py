"""What every folder may use: the error tree, constants, hashing and atomic writes, patch ids,
credentials out of URLs, the crash log. Imports nothing of patchkit above it."""
