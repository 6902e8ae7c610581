"""What a patched SGLang really runs: `verify`'s checks in a child interpreter of the target's
environment, and `verify --url` against a running server's report."""
