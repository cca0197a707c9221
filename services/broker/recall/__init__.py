"""RecallMessage (RocketMQ 5.3): cancel a timer message before delivery with a delete marker."""
