"""Kernel pipeline: get a 5.10 tree (source), load a patch series (series), apply it with git am --3way
(backport), compile-check the touched objects (compile); kpatch-build and validation build on the result."""
