from aiptrain._cli.main import main

main()
