"""Object stores: GCS (google-cloud-storage) and the local directory the local backend uses."""
