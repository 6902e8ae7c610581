"""One module per subcommand; each exposes one function that takes plain values and returns
an exit code."""
