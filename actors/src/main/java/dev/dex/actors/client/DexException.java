package dev.dex.actors.client;

/** The cluster answered an operation with an error; the message says which and why. */
public final class DexException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DexException(String message) {
        super(message);
    }
}
