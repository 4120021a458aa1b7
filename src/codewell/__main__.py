from codewell.cli.main import main

main()
