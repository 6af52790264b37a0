"""Discovery on a live bus: the tools a model calls on a CanDriver (survey, snapshots,
correlation, define_signal, the draft, events, matching known databases) and the OBD-II
poller that gives them a reference. Attached to a CanDriver from above (`live.attach`)."""
