"""`python -m nvcre_argo` runs the `nvcre-argo` command."""

from nvcre_argo.cli.main import main

if __name__ == "__main__":
    main()
