"""Delay levels: the put-path redirect to SCHEDULE_TOPIC_XXXX and ScheduleMessageService."""
