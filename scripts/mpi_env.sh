# Sourced by the scripts: Open MPI settings for running as root inside a
# container. On a normal cluster account none of this is needed.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
