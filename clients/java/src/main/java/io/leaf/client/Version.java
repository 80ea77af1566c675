package io.leaf.client;

import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;

/** This library's version: the one in {@code clients/java/VERSION}, copied into the jar by build.sh. */
public final class Version {
    private Version() {
    }

    /** The version ({@code 0.1.0}), or {@code "unknown"} when run from classes built without build.sh. */
    public static String get() {
        try (InputStream in = Version.class.getResourceAsStream("version.txt")) {
            return in == null ? "unknown" : new String(in.readAllBytes(), StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            return "unknown";
        }
    }
}
