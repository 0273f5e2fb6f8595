from mheval.cli import main

main()
