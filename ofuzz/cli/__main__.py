"""`python -m ofuzz.cli`: the same entry point as the `ofuzz` command."""
from ofuzz.cli import main

main()
