from patchkit.cli.fast_path import main

if __name__ == "__main__":
    main()
