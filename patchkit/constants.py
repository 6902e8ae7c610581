"""File names, environment variables, schema versions and exit codes."""

PACKAGE = "sglang"

# Everything patchkit keeps inside a target folder lives under this directory, so that
# `revert` can leave the folder exactly as the release installed it by removing it.
STATE_DIR = ".patchkit"
STATE_FILE = "state.json"
BACKUPS_DIR = "backups"
PENDING_DIR = "pending"
JOURNAL_FILE = "journal.json"
LOCK_FILE = "lock"
# Copies of bytes that `--force` overwrote, kept until the next full revert.
OVERWRITTEN_DIR = "overwritten"

STATE_SCHEMA = 2
STATE_SCHEMAS_READ = (1, 2)  # 2 adds each file's patch_sha256; schema 1 is still read
JOURNAL_SCHEMA = 2

# Seconds a run waits for another run's lock on the same folder before it gives up (exit 5).
DEFAULT_LOCK_TIMEOUT = 60.0
MAX_LOCK_TIMEOUT = 86400.0  # a day: beyond it a wait is a mistake (and nan/inf wait for ever)
MANIFEST_SCHEMA = 1

# Where patchkit caches downloaded wheels and writes crash logs (default ~/.cache/patchkit).
ENV_HOME = "PATCHKIT_HOME"

EXIT_OK = 0
EXIT_PLAN = 1  # a patch could not be planned or validated; nothing written
EXIT_USAGE = 2
EXIT_TARGET = 3  # SGLang not found, version mismatch, no patch set for the version
EXIT_DRIFT = 4  # a file changed outside patchkit would be lost; nothing written
EXIT_LOCKED = 5  # gave up waiting for another patchkit run's lock (--lock-timeout)
EXIT_ENVIRONMENT = 6  # read-only, permission, no space, I/O error, wrong file type, undecodable bytes
EXIT_BUG = 70  # unexpected error; traceback in the log file named on stderr
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = """\
Exit codes:
  0    done, or nothing to do
  1    a patch could not be planned or validated (nothing written)
  2    usage error (also a --target that is not a version)
  3    SGLang not found, version mismatch, or a release patchkit knows
       nothing about (--fetch)
  4    a file was changed outside patchkit and the operation would lose
       that change (nothing written; --force overrides)
  5    gave up waiting for another patchkit run on the same folder
       (--lock-timeout)
  6    environment failure reading or writing a file (read-only, permission
       denied, no space left, I/O error, wrong file type, undecodable
       bytes); the file and the cause are named
  70   unexpected error (the log file holding the traceback is named)
  130  interrupted (Ctrl-C); the message says whether the files were left
       as they were or the run was finished first"""
