"""The argument parser: jsonargparse's errors as one line, without its usage text."""

from lightning.pytorch.cli import LightningArgumentParser

from app.errors import fail

# The parts of jsonargparse's account of a failed Union that do not help.
NOISE = ("Does not validate", "Subtypes:", "Errors:", "Given value", "Expected a <class 'NoneType'>")


class Parser(LightningArgumentParser):
    """LightningCLI's parser, except that a bad flag or config ends in one ``error:`` line, exit 1.

    jsonargparse prints its whole usage (~80 lines) before the error, which is often several lines
    of the alternatives it tried: the one line with the error says it better.
    """

    def error(self, message: str, ex: Exception | None = None) -> None:
        if not self.exit_on_error:  # jsonargparse is trying alternatives: it catches this error
            super().error(message, ex)
        lines = (line.strip(" -") for line in message.replace('"<unicode string>", ', "").splitlines())
        fail(" ".join(line for line in lines if line and not line.startswith(NOISE)))
