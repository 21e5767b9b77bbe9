"""Topics (issue 32): what members follow, who follows it, and notifying a topic's followers."""
