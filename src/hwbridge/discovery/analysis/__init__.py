"""Discovery's offline analysis: the fields of a payload from how its bits flip (segment,
analyse, fields), floats, counters and checksums, multiplexers, correlation with a reference
(a DBC or OBD-II), events, the known database that fits, and the survey of a whole bus.
Builds the report's documents; never touches a bus."""
