"""What the tests share: data written in real formats, ways to run the CLI, callbacks they add to a run."""
