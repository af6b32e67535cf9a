from skillopt_sleep.cli import main

if __name__ == "__main__":
    main()
