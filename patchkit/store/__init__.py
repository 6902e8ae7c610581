"""What patchkit keeps in and beside a target: finding the SGLang to patch, the state file and
backups, the run lock, the transaction that commits a plan, stale records, the runtime plugin's
files."""
