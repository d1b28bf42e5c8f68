"""The report page: plain blocks (document.py) rendered twice, as Markdown and as HTML."""
