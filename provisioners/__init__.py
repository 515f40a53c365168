"""fuzzball_provisioners: node provisioners (aws, gcp, oci, onprem)."""
