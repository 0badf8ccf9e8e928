"""auto-STEER with the user's models (the STEER-ME paper's §3.2 and Figure 1, re-implemented): a
writer model style-transfers and rewords STEER-ME's gold templates (write_task.py, every
template validated by validate.py), a checker model solves questions filled from them
(check_task.py), a person decides on the flagged ones (written.py, review_page.py), a fresh set
is generated from the usable ones, and one model's runs on the bundled and the written set are
compared (contamination.py). The writer and the checker are tasks (in no suite) that `econeval
steer write` and `steer check` run through the API into ordinary run folders; the commands
(commands.py) join STEER-ME's `steer` group."""

from ... import registry
from . import check_task, write_task


def _tables(runs):
    from .contamination import report_table

    conta = report_table(runs)  # a bundled and a written set's runs, side by side
    return [conta] if conta else []


registry.task(write_task.WriteTemplates)
registry.task(check_task.CheckTemplates)
registry.plugin("auto-steer", tables=_tables, commands="econeval.plugins.auto_steer.commands:steer")
