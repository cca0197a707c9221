"""Long polling: pulls that found nothing wait here until a matching message is stored."""
