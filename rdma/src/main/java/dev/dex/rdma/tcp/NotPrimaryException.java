package dev.dex.rdma.tcp;

/** A change asked of a replica that does not take changes (a backup, or a primary that was replaced): answered NOT_PRIMARY. */
final class NotPrimaryException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    NotPrimaryException(String message) {
        super(message);
    }
}
