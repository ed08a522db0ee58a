from fp16doctor.cli import main

main()
