"""`python -m tinytorch.bench`: the tinytorch-bench command."""
from . import main

if __name__ == "__main__":
    main()
