"""``python -m workers.cli``: the same as ``mneme``."""

from workers.cli import app

if __name__ == "__main__":
    app(prog_name="mneme")
