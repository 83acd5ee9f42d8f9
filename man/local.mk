## man/: the manual pages (ebb(1), ebb(7), ebb-trace(5)).
dist_man_MANS += man/ebb.1 man/ebb.7 man/ebb-trace.5
