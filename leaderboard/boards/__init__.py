"""The boards' read model, in a room of its own: what every write calls (`marks`), the one writer
of the stored rows (`rescoring`, driven by the background `rescorer` and by `rebuild`), the rows as
stored, read only (`stored`), the aggregate they hold (`scoring`) and the model signals that mark
(`signals`). Pages and the API read it through leaderboard/reads/; they never write it."""
