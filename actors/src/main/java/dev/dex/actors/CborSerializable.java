package dev.dex.actors;

/**
 * Marker of every message that may cross the network: bound to Jackson CBOR in this module's
 * {@code reference.conf}. Java serialization stays off.
 */
public interface CborSerializable {
}
