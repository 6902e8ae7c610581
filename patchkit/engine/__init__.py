"""The patch sets and what is done with them on a target: load, render, decide each patch's
state, plan applies and reverts, identities, upstream tracking, matrix verdicts, capture and export."""
