"""Device plugins: hook implementations that find devices and prepare containers for them."""
