from minibroker.cli import main

main()
