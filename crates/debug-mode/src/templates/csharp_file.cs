#region agent log
static class AgentDebugLog
{
    private const string AppendPath = "__APPEND_PATH__";
    // Secret key names, compared without case and separators: a short secret word as the
    // whole name, or a name ending with a secret word (api_key, accessToken; not tokenCount).
    private static readonly System.Text.RegularExpressions.Regex Secret = new System.Text.RegularExpressions.Regex(
        "^(?:pwd|auth|sid|jwt|otp|pin)$|(?:password|passwd|passphrase|secret|token|apikey|authorization|cookies?|privatekey|accesskey|credentials?|signature|sessionid)$");
    private static readonly System.Text.RegularExpressions.Regex NotAlnum = new System.Text.RegularExpressions.Regex("[^a-z0-9]");

    public static void Log(string hypothesisId, string location, string message, object? data)
    {
        try
        {
            var evt = new System.Text.Json.Nodes.JsonObject
            {
                ["hypothesisId"] = hypothesisId,
                ["location"] = location,
                ["message"] = message,
                ["data"] = Sanitize(System.Text.Json.JsonSerializer.SerializeToNode(data), 0),
                ["timestamp"] = System.DateTimeOffset.UtcNow.ToUnixTimeMilliseconds(),
            };
            System.IO.File.AppendAllText(AppendPath, evt.ToJsonString() + "\n");
        }
        catch (System.Exception)
        {
            // A failed observation must never change control flow.
        }
    }

    private static System.Text.Json.Nodes.JsonNode? Sanitize(System.Text.Json.Nodes.JsonNode? node, int depth)
    {
        if (node is null) return null;
        if (depth > 8) return System.Text.Json.Nodes.JsonValue.Create("[depth limit]");
        if (node is System.Text.Json.Nodes.JsonObject obj)
        {
            var result = new System.Text.Json.Nodes.JsonObject();
            var count = 0;
            foreach (var pair in obj)
            {
                if (count++ >= 100) break;
                result[pair.Key] = Secret.IsMatch(NotAlnum.Replace(pair.Key.ToLowerInvariant(), ""))
                    ? System.Text.Json.Nodes.JsonValue.Create("[REDACTED]")
                    : Sanitize(pair.Value, depth + 1);
            }
            return result;
        }
        if (node is System.Text.Json.Nodes.JsonArray arr)
        {
            var result = new System.Text.Json.Nodes.JsonArray();
            var count = 0;
            foreach (var item in arr)
            {
                if (count++ >= 100) break;
                result.Add(Sanitize(item, depth + 1));
            }
            return result;
        }
        if (node is System.Text.Json.Nodes.JsonValue value && value.TryGetValue<string>(out var text) && text.Length > 2000)
        {
            return System.Text.Json.Nodes.JsonValue.Create(text.Substring(0, 2000) + "…");
        }
        return System.Text.Json.Nodes.JsonNode.Parse(node.ToJsonString());
    }
}
#endregion
