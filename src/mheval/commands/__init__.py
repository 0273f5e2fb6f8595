"""The `mheval` command's parts: consoles and shared options, and the command groups that `cli.py` registers
(catalogues, agreement, training, the rating study). Each command reads its arguments, calls the library and
prints the result."""
