"""What the process itself provides, on either backend: the system clock and outbound HTTP (webhook
deliveries). Both the local server and the AWS functions build these, so they are named for what they are,
not for a backend."""
