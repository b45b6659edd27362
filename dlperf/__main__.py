from dlperf.cli import main

main()
