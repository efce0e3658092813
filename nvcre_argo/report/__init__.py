"""Reports of a Certification run: one value built from what the cluster says, three ways to print it.

`model` turns a Certification, its status and the decoded ConfigMaps (failed nodes with reasons, succeeded
node names) and measurement figures into a `Report`; `render` prints it as text for people, JSON for tools
and JUnit XML for CI. Both are pure, so the same inputs give the same bytes, and the exit code a script sees
(`exit_code`) is decided in one place: 0 only for PASSED (docs/nvcre-contract.md §7.13).
"""
