"""``python -m server.cli`` runs the ``memoir`` command (handy without an installed script)."""

from server.cli.main import main

main()
