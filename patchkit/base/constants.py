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

STATE_SCHEMA = 3
# 2 adds each file's patch_sha256, 3 the runtime report's files (`runtime`); 1 and 2 are still read
STATE_SCHEMAS_READ = (1, 2, 3)
JOURNAL_SCHEMA = 2

# The runtime report (patchkit/store/runtime_plugin.py): a module and the dist-info declaring it as an SGLang
# plugin, written beside the imported `sglang/` (an editable install: beside its metadata), so
# that every SGLang process that loads plugins says which patches it really runs.
RUNTIME_MODULE = "sglang_patchkit_runtime"
RUNTIME_DIST_INFO = "sglang_patchkit_runtime-1.dist-info"
RUNTIME_PLUGIN_NAME = "patchkit"  # the entry point's name: what SGLANG_PLUGINS must list
RUNTIME_GROUP = "sglang.srt.plugins"
ENV_DISABLE = "SGLANG_PATCHKIT_DISABLE"  # patch ids, comma-separated, that take the pristine path

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

LABEL_PREFIX = "io.patchkit"  # a patched image's labels (image/dockerfile writes them, verify --url reads them)

DIFF_SUFFIXES = (".patch", ".diff")  # the file names that load as diff patches (patchkit.diffs.unidiff)
