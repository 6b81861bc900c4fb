"""``python -m toolflow``."""

from toolflow._cli import main

main()
