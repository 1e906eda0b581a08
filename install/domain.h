/*
 * Performance Metrics Domain number of the perfevent agent.
 * It must match PERFEVENT in $PCP_VAR_DIR/pmns/stdpmid: the Go agent
 * takes over the C agent's domain so that clients, archives and
 * pmlogger configurations keep working unchanged.
 */
#define PERFEVENT 127
