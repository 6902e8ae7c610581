"""The command line: the fast path (a plain status / apply before click), the click wiring, the
error handler (an exception -> an exit code and one line) and the exit code tables. Nothing
imports it. Kept free of imports here: the fast path must not load click."""
