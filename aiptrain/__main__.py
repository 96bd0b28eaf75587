from aiptrain.cli.main import main

main()
