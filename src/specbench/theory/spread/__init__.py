"""A prediction's interval: the terms it does not know for its setup and their bands
(:mod:`.terms`), propagated to the result (:mod:`.interval`)."""
