from skilltune.cli import main

main()
