package io.leaf.client;

import java.util.Map;

/**
 * A token just created or rotated, with its bearer secret: the only time the cluster shows
 * it. {@link #toString()} never prints the bearer.
 *
 * @param token the token
 * @param bearer the secret to send as {@code Authorization: Bearer <bearer>}
 */
public record IssuedToken(TokenInfo token, String bearer) {
    static IssuedToken fromJson(Map<String, Object> m) {
        return new IssuedToken(TokenInfo.fromJson(Json.obj(m, "token")), Json.str(m, "bearer"));
    }

    @Override
    public String toString() {
        return "IssuedToken[token=" + token + ", bearer=(redacted)]";
    }
}
