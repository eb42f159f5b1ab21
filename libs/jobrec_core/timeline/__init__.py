"""Time: what existed at a date. Every stage reads dated tables through these views, so that
nothing from after the run's as-of date reaches a feature, a model or a recommendation."""
